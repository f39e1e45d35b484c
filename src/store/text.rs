//! A text a store keeps, shared by every reply and fork that holds it, behind a pointer of
//! one word. An `Arc<str>` is two (its address and its length), and a store keeps one per
//! message in a persistent vector: the memory store's leaves of 64 took 1,568 bytes with
//! the word of bits it keeps beside each, mimalloc's 1,792-byte size, 28 bytes a message.
//! Here the length and that word live in the allocation, in front of the text, and a leaf
//! of 64 is 544 bytes, mimalloc's 640-byte size: 10 bytes a message. The text's own
//! allocation is 12 bytes longer for it, which costs a long text nothing when it still
//! fits the allocator's size it took (a 1 KB message's does), and a short one often one
//! size up (8 or 16 bytes): a tiny message saves a few bytes, a 1 KB one 18.
//!
//! It is an `Arc<[u8]>` underneath, kept by the address of its first byte: its length is
//! read from there whenever the text is read, and to make the `Arc` whole again whenever
//! the count changes.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Weak};

/// The bytes in front of the text: its length (`u32`), then the word kept with it
/// (`u64`), little-endian.
const HEAD: usize = 12;

/// A shared text and a word kept with it (`head`), behind a thin pointer.
pub struct Text {
    /// The first byte of an `Arc<[u8]>` of `HEAD` bytes and then the text, which this
    /// value holds one strong count of.
    start: NonNull<u8>,
}

// SAFETY: a `Text` is an `Arc<[u8]>` that is never written after it is made, and
// `Arc<[u8]>` is `Send` and `Sync`.
unsafe impl Send for Text {}
unsafe impl Sync for Text {}

impl Text {
    /// `text`, with `head` kept in front of it; `None` when it is 4 GiB or longer.
    pub fn new(head: u64, text: &str) -> Option<Text> {
        let length = u32::try_from(text.len()).ok()?;
        let bytes = Arc::<[u8]>::new_uninit_slice(HEAD + text.len());
        // Not `Arc::get_mut`, whose check of the counts is an atomic operation: a new Arc
        // has one holder, and `as_ptr` points into its allocation without a reference.
        let out = Arc::as_ptr(&bytes).cast::<u8>().cast_mut();
        // SAFETY: `out` is `HEAD + text.len()` bytes this function alone holds, written
        // here each once, from places that do not overlap them; after that, all are.
        let bytes = unsafe {
            out.copy_from_nonoverlapping(length.to_le_bytes().as_ptr(), 4);
            out.add(4).copy_from_nonoverlapping(head.to_le_bytes().as_ptr(), 8);
            out.add(HEAD).copy_from_nonoverlapping(text.as_ptr(), text.len());
            bytes.assume_init()
        };
        Some(Text::from_arc(bytes))
    }

    /// Takes over an `Arc` that `new` made (directly, or through a `WeakText`).
    fn from_arc(bytes: Arc<[u8]>) -> Text {
        let raw = Arc::into_raw(bytes);
        // SAFETY: `Arc::into_raw` never gives a null pointer.
        Text { start: unsafe { NonNull::new_unchecked(raw as *const u8 as *mut u8) } }
    }

    /// The pointer `Arc::into_raw` gave, whole again: its address and its length.
    fn raw(&self) -> *const [u8] {
        // SAFETY: `start` is the first byte of a live allocation (this value holds a
        // strong count) whose first `HEAD` bytes were written by `new` and never after.
        let length = unsafe { self.start.as_ptr().cast::<[u8; 4]>().read() };
        std::ptr::slice_from_raw_parts(self.start.as_ptr(), HEAD + u32::from_le_bytes(length) as usize)
    }

    /// The `Arc`, borrowed: not dropped, so its count stays as it is. Only to read it
    /// (`downgrade`, `strong_count`): taken out of the `ManuallyDrop`, or made unique
    /// (`get_mut`, `make_mut`, `try_unwrap`), it would give back a count it does not own.
    fn arc(&self) -> ManuallyDrop<Arc<[u8]>> {
        // SAFETY: `raw` is what `Arc::into_raw` gave, and this value holds a strong count
        // for as long as the borrow lasts.
        ManuallyDrop::new(unsafe { Arc::from_raw(self.raw()) })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: as `raw`; the bytes live as long as `self`, which holds a count.
        unsafe { &*self.raw() }
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: `new` copied these bytes from a `str`, and nothing writes them after.
        unsafe { std::str::from_utf8_unchecked(&self.bytes()[HEAD..]) }
    }

    /// The word kept with the text.
    pub fn head(&self) -> u64 {
        let mut head = [0; 8];
        head.copy_from_slice(&self.bytes()[4..HEAD]);
        u64::from_le_bytes(head)
    }

    /// A reference that does not keep the text.
    pub fn downgrade(&self) -> WeakText {
        WeakText(Arc::downgrade(&self.arc()))
    }
}

impl Clone for Text {
    fn clone(&self) -> Text {
        // SAFETY: as `arc`: the pointer `Arc::into_raw` gave, its count held by `self`.
        unsafe { Arc::increment_strong_count(self.raw()) };
        Text { start: self.start }
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        // SAFETY: this value's strong count, given back once.
        unsafe { Arc::decrement_strong_count(self.raw()) };
    }
}

impl std::ops::Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// A `Text` that may be gone (`Text::downgrade`).
#[derive(Clone, Debug)]
pub struct WeakText(Weak<[u8]>);

impl WeakText {
    pub fn upgrade(&self) -> Option<Text> {
        self.0.upgrade().map(Text::from_arc)
    }

    /// Whether the text is still kept by someone.
    pub fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_keeps_its_bytes_and_its_head() {
        for text in ["", "a", "é, ü and \u{1F600}", &"x".repeat(5000)] {
            let kept = Text::new(u64::MAX - 7, text).unwrap();
            assert_eq!((kept.as_str(), kept.head()), (text, u64::MAX - 7));
            let copy = kept.clone();
            drop(kept);
            assert_eq!((&*copy, copy.head()), (text, u64::MAX - 7));
        }
    }

    #[test]
    fn a_text_is_one_word_and_shared() {
        assert_eq!(size_of::<Text>(), size_of::<usize>());
        assert_eq!(size_of::<Option<Text>>(), size_of::<usize>());
        let kept = Text::new(1, "shared").unwrap();
        let copy = kept.clone();
        assert_eq!(copy.as_ptr(), kept.as_ptr());
        assert_eq!(Arc::strong_count(&kept.arc()), 2);
        drop(copy);
        assert_eq!(Arc::strong_count(&kept.arc()), 1);
    }

    #[test]
    fn a_text_is_shared_across_threads() {
        let kept = Text::new(9, "across").unwrap();
        let weak = kept.downgrade();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let copy = kept.clone();
                let weak = weak.clone();
                std::thread::spawn(move || (copy.to_string(), weak.upgrade().map(|t| t.head())))
            })
            .collect();
        drop(kept);
        for thread in threads {
            assert_eq!(thread.join().unwrap(), ("across".to_owned(), Some(9)));
        }
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn a_weak_text_sees_the_text_until_the_last_holder_lets_go() {
        let kept = Text::new(3, "image holder").unwrap();
        let copy = kept.clone();
        let weak = kept.downgrade();
        drop(kept);
        let back = weak.upgrade().unwrap();
        assert_eq!((&*back, back.head(), weak.alive()), ("image holder", 3, true));
        drop((copy, back));
        assert!(!weak.alive() && weak.upgrade().is_none());
    }
}
