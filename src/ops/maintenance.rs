//! Use-cases over the whole store: every session (read page by page), retention (the
//! sessions not updated since a time, deleted unless they changed meanwhile), and the
//! consistency check (the store's own, then every history against the rules).

use std::sync::Arc;

use crate::error::{Error, Result, quote};
use crate::ops::Ops;
use crate::ops::limits::WALK_PAGE as PAGE;
use crate::session::{Audit, ListKey, Message, SessionInfo};

impl Ops {
    /// The sessions in `session/list` order (newest creation first), at most `limit`.
    pub async fn sessions(&self, limit: Option<usize>) -> Result<Vec<SessionInfo>> {
        let mut out: Vec<SessionInfo> = Vec::new();
        let mut after = None;
        loop {
            let want = limit.map_or(PAGE, |l| l.saturating_sub(out.len()).min(PAGE));
            if want == 0 {
                return Ok(out);
            }
            let page = self.store.list(want, after).await?;
            let last_page = page.len() < want;
            after = page.last().map(ListKey::of);
            out.extend(page);
            if last_page {
                return Ok(out);
            }
        }
    }

    /// A session and every message it stores, as stored (`convo show`).
    pub async fn transcript(&self, session_id: &str) -> Result<(SessionInfo, Vec<Arc<Message>>)> {
        let page = self.store.history(session_id, 0, None).await?;
        Ok((page.info, page.messages))
    }

    /// The sessions last updated before `cutoff` (a canonical time stamp), in list order.
    pub async fn updated_before(&self, cutoff: &str) -> Result<Vec<SessionInfo>> {
        let all = self.sessions(None).await?;
        Ok(all.into_iter().filter(|s| s.updated_at.as_str() < cutoff).collect())
    }

    /// Deletes each session unless it changed (or went) since `sessions` were read;
    /// returns the ones deleted. Forks keep their history.
    pub async fn delete_unchanged(&self, sessions: Vec<SessionInfo>) -> Result<Vec<SessionInfo>> {
        let mut deleted = Vec::new();
        for info in sessions {
            match self.store.delete(&info.session_id, Some(info.revision)).await {
                Ok(()) => deleted.push(info),
                Err(Error::RevisionConflict { .. } | Error::SessionNotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// What is wrong with the store: its own findings (`Store::check`), then, for every
    /// session, where its stored history breaks the conversation rules (`Audit`).
    pub async fn check(&self) -> Result<Vec<String>> {
        let mut findings = self.store.check().await?;
        for info in self.sessions(None).await? {
            let id = &info.session_id;
            let mut audit = Audit::default();
            let mut offset = 0;
            loop {
                let page = match self.store.history(id, offset, Some(PAGE as u64)).await {
                    Ok(page) => page,
                    // Deleted since it was listed.
                    Err(Error::SessionNotFound(_)) => break,
                    Err(e) => {
                        findings.push(format!("session {}: its history cannot be read: {e}", quote(id)));
                        break;
                    }
                };
                for message in &page.messages {
                    findings.extend(audit.check(message).into_iter().map(|f| format!("session {}: {f}", quote(id))));
                }
                offset += page.messages.len() as u64;
                if page.messages.len() < PAGE {
                    break;
                }
            }
        }
        Ok(findings)
    }
}
