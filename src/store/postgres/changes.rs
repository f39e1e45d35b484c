//! Changes across processes through LISTEN/NOTIFY: each change sends a notification on
//! the channel `convo` inside its own transaction (PostgreSQL delivers it at commit, in
//! commit order, and drops it when the change rolls back), naming the schema so that
//! several applications can share a database. The store, when it opens, starts a task
//! that LISTENs on a connection of its own and publishes what arrives to the watchers;
//! when that connection is lost it reconnects with back-off. Changes committed while it is reconnecting are
//! not seen (a subscriber reads the session again after `session/changed` anyway).

use std::sync::Weak;
use std::time::Duration;

use deadpool_postgres::ClientWrapper as Db;
use futures_util::StreamExt as _;
use tokio::sync::oneshot;
use tokio_postgres::AsyncMessage;

use crate::error::Result;
use crate::store::feed::{Change, ChangeKind, Feed};
use crate::store::postgres::rows::execute;

const CHANNEL: &str = "convo";

/// Sends the change, inside the transaction that made it.
pub async fn record(
    db: &Db,
    schema: &str,
    session_id: &str,
    revision: u64,
    kind: ChangeKind,
    message_count: u64,
) -> Result<()> {
    let payload = serde_json::json!([schema, session_id, revision, kind.as_str(), message_count]).to_string();
    execute(db, "SELECT pg_notify($1, $2)", &[&CHANNEL, &payload]).await.map(drop)
}

fn parse(schema: &str, payload: &str) -> Option<Change> {
    let serde_json::Value::Array(items) = serde_json::from_str(payload).ok()? else { return None };
    let [s, session_id, revision, kind, count] = <[serde_json::Value; 5]>::try_from(items).ok()?;
    (s.as_str()? == schema).then_some(())?;
    Some(Change {
        session_id: session_id.as_str()?.to_owned(),
        revision: revision.as_u64()?,
        kind: ChangeKind::parse(kind.as_str()?)?,
        message_count: count.as_u64()?,
    })
}

/// Listens while `feed` lives, reconnecting after a lost connection; `ready` is told
/// once the first LISTEN is in place (or has failed).
pub async fn listen(target: super::connect::Target, schema: String, feed: Weak<Feed>, ready: oneshot::Sender<()>) {
    let mut ready = Some(ready);
    let mut wait = Duration::from_millis(100);
    while feed.strong_count() > 0 {
        match target.config.connect(target.tls.clone()).await {
            Ok((client, mut connection)) => {
                wait = Duration::from_millis(100);
                let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
                let statement = format!("LISTEN {CHANNEL}");
                let listening = {
                    let listen = client.batch_execute(&statement);
                    let mut listen = std::pin::pin!(listen);
                    // Drive the connection until LISTEN is answered.
                    loop {
                        tokio::select! {
                            done = &mut listen => break done.map_err(|e| e.to_string()),
                            message = messages.next() => if message.is_none() { break Err("connection closed".into()) },
                        }
                    }
                };
                ready.take().map(|r| r.send(()));
                match listening {
                    Err(e) => tracing::warn!(error = %e, "cannot LISTEN for changes"),
                    Ok(()) => {
                        if !publish(&mut messages, &schema, &feed).await {
                            return;
                        }
                    }
                }
                drop(client);
            }
            Err(e) => {
                ready.take().map(|r| r.send(()));
                tracing::warn!(error = %e, "cannot connect to listen for changes; retrying");
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// Publishes notifications until the connection ends (`true`: reconnect) or nobody holds
/// the feed any more (`false`).
async fn publish<S>(messages: &mut S, schema: &str, feed: &Weak<Feed>) -> bool
where
    S: futures_util::Stream<Item = std::result::Result<AsyncMessage, tokio_postgres::Error>> + Unpin,
{
    loop {
        let message = tokio::select! {
            message = messages.next() => message,
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if feed.strong_count() == 0 { return false; }
                continue;
            }
        };
        match message {
            Some(Ok(AsyncMessage::Notification(n))) => {
                let Some(feed) = feed.upgrade() else { return false };
                if let Some(change) = parse(schema, n.payload())
                    && feed.watched()
                {
                    feed.publish(change);
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the connection that listens for changes was lost");
                return true;
            }
            None => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_its_own_schemas_changes() {
        let change = parse("convo", r#"["convo","s1",3,"appended",7]"#).expect("a change");
        assert_eq!((change.session_id.as_str(), change.revision, change.message_count), ("s1", 3, 7));
        assert_eq!(change.kind, ChangeKind::Appended);
        assert!(parse("other", r#"["convo","s1",3,"appended",7]"#).is_none());
        assert!(parse("convo", "nonsense").is_none());
    }
}
