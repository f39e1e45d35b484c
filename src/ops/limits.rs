//! Every limit and default of the use-cases, in one place, and the one way a page is cut:
//! ask the store for one more than the page holds, and say whether more follow.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::session::export::Format;

/// The most messages one request may carry (`add_messages`, `from_dict`) and the most
/// one reply may hold (`history`, `to_dict`): beyond them, error 1005.
pub const MAX_MESSAGES: u64 = 100_000;

/// `session/list`'s page: by default, and at most.
pub const DEFAULT_LIST_LIMIT: u64 = 100;
pub const MAX_LIST_LIMIT: u64 = 1000;

/// `session/search`'s page: by default, and at most.
pub const DEFAULT_SEARCH_LIMIT: u64 = 20;
pub const MAX_SEARCH_LIMIT: u64 = 200;

/// How long convo waits for the host by default (`timeout_ms`): ten minutes.
pub const DEFAULT_HOST_TIMEOUT_MS: u64 = 600_000;

/// Histories and exports are repaired unless a client asks otherwise (`repair: false`).
pub const REPAIR: bool = true;

/// `session/count_tokens` counts the body of this format unless given one.
pub const COUNT_FORMAT: Format = Format::OpenaiChat;

/// `session/json` asks the host once more for each retry; none unless given `retries`.
pub const JSON_RETRIES: u32 = 0;

/// Sessions, or messages, read at once while walking the whole store.
pub const WALK_PAGE: usize = 1000;

/// 1005 when `what` holds more than `MAX_MESSAGES` messages.
pub fn check_count(what: &str, n: usize) -> Result<()> {
    if n as u64 > MAX_MESSAGES {
        return Err(Error::TooLarge(format!("{what} holds {n} messages; the limit is {MAX_MESSAGES}")));
    }
    Ok(())
}

/// A page size as given (`limit`), or the default; -32602 outside `1..=max`.
pub fn page_size(limit: Option<u64>, default: u64, max: u64) -> Result<u64> {
    let limit = limit.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        return Err(Error::invalid(format!("limit: must be from 1 to {max}, got {limit}")));
    }
    Ok(limit)
}

/// How many to ask the store for, to know whether a page of `limit` is the last.
pub fn one_more(limit: u64) -> u64 {
    limit.saturating_add(1)
}

/// Cuts what the store gave (`one_more`) to the page; `true` when more follow.
pub fn cut<T>(mut found: Vec<T>, limit: u64) -> (Vec<T>, bool) {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let more = found.len() > limit;
    found.truncate(limit);
    (found, more)
}

/// `timeout_ms` as given, or the default wait for the host.
pub fn host_timeout(timeout_ms: Option<u64>) -> Duration {
    Duration::from_millis(timeout_ms.unwrap_or(DEFAULT_HOST_TIMEOUT_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_cut_from_one_more_and_says_whether_more_follow() {
        assert_eq!(cut(vec![1, 2, 3], 2), (vec![1, 2], true));
        assert_eq!(cut(vec![1, 2], 2), (vec![1, 2], false));
        assert_eq!(cut(Vec::<u8>::new(), 2), (vec![], false));
        assert_eq!(one_more(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_page_size_outside_its_range_is_refused() {
        assert_eq!(page_size(None, 20, 200).unwrap(), 20);
        assert_eq!(page_size(Some(200), 20, 200).unwrap(), 200);
        for bad in [0, 201] {
            assert_eq!(
                page_size(Some(bad), 20, 200).unwrap_err().to_string(),
                format!("invalid params: limit: must be from 1 to 200, got {bad}")
            );
        }
    }
}
