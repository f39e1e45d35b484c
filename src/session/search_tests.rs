use serde_json::json;

use super::*;
use crate::session::Role;

fn words(text: &str) -> Vec<String> {
    indexed_words(text).map(|w| w.text).collect()
}

fn term(words: &[&str], prefix: bool) -> Term {
    Term { words: words.iter().map(|w| (*w).to_owned()).collect(), prefix }
}

#[test]
fn words_are_alphanumeric_runs_lowercased() {
    assert_eq!(words("Hello, wörld! src/main.rs x2 ÉTÉ"), ["hello", "wörld", "src", "main", "rs", "x2", "été"]);
}

#[test]
fn overlong_words_are_not_indexed() {
    let long = "a".repeat(MAX_WORD_BYTES + 1);
    assert_eq!(words(&format!("one {long} two")), ["one", "two"]);
}

#[test]
fn a_word_is_lowercased_a_character_at_a_time() {
    // `str::to_lowercase` would end it in `ς`; the indexes already written hold `σ`.
    assert_eq!(words("ΣΑΣ Straße İX"), ["σασ", "straße", "i\u{307}x"]);
    assert_eq!(index_text(&Message::new(Role::User, json!("ΣΑΣ and ABC"))), "σασ and abc");
}

#[test]
fn only_the_first_words_are_indexed() {
    let text = "w ".repeat(MAX_WORDS + 10);
    assert_eq!(words(&text).len(), MAX_WORDS);
    assert_eq!(index_text(&Message::new(Role::User, json!(text))), "w ".repeat(MAX_WORDS).trim_end());
}

#[test]
fn text_parts_are_text_and_other_parts_are_not() {
    let mut m = Message::new(Role::User, json!([{"type": "text", "text": "one"}, {"type": "image_url", "text": "no"}]));
    assert_eq!(message_text(&m), "one");
    m.content = json!("plain");
    assert_eq!(index_text(&m), "plain");
}

#[test]
fn a_query_parses_into_words_prefixes_and_phrases() {
    let q = Query::parse(r#"Foo ba* "New York" "san fr"* e-mail"#).unwrap();
    assert_eq!(
        q.terms,
        [
            term(&["foo"], false),
            term(&["ba"], true),
            term(&["new", "york"], false),
            term(&["san", "fr"], true),
            term(&["e", "mail"], false)
        ]
    );
}

#[test]
fn malformed_queries_are_refused() {
    for bad in ["", "   ", "?!", r#""open"#, "fo*o", "*", r#""a"b"#, r#""a""b""#, "\"\""] {
        assert!(Query::parse(bad).is_err(), "{bad:?} parsed");
    }
    assert!(Query::parse(&"w ".repeat(MAX_QUERY_WORDS + 1)).is_err());
    assert!(Query::parse(&"w".repeat(MAX_QUERY_BYTES + 1)).is_err());
}

#[test]
fn wordless_terms_are_ignored() {
    assert_eq!(Query::parse("- foo ?").unwrap().terms, [term(&["foo"], false)]);
}

#[test]
fn queries_render_for_fts5_and_postgresql() {
    let q = Query::parse(r#"foo ba* "new york" "san fr"*"#).unwrap();
    assert_eq!(q.fts5(), r#""foo" AND "ba" * AND "new york" AND "san fr" *"#);
    assert_eq!(q.tsquery(), "('foo') & ('ba':*) & ('new' <-> 'york') & ('san' <-> 'fr':*)");
}

#[test]
fn a_tsvector_lists_each_word_with_its_positions() {
    let m = Message::new(Role::User, json!("b a b"));
    assert_eq!(tsvector(&m), "'a':2 'b':1,3");
}

#[test]
fn every_term_must_match() {
    let text = words("The quick brown fox");
    assert_eq!(Query::parse("quick fox").unwrap().score(&text), Some(2));
    assert_eq!(Query::parse("quick dog").unwrap().score(&text), None);
    assert_eq!(Query::parse("qu*").unwrap().score(&text), Some(1));
    assert_eq!(Query::parse("\"brown fox\"").unwrap().score(&text), Some(1));
    assert_eq!(Query::parse("\"fox brown\"").unwrap().score(&text), None);
    assert_eq!(Query::parse("QUICK").unwrap().score(&text), Some(1));
}

#[test]
fn a_snippet_brackets_matches_around_the_first() {
    let q = Query::parse("fox").unwrap();
    assert_eq!(q.snippet("The quick  brown\nFox, jumps."), "The quick brown [Fox], jumps");
    let long = format!("{} needle {}", "w ".repeat(30), "v ".repeat(30));
    let snippet = q.snippet(&long);
    assert_eq!(snippet, format!("{}w…", "w ".repeat(SNIPPET_WORDS - 1)));
    let snippet = Query::parse("needle").unwrap().snippet(&long);
    assert_eq!(snippet, "…w w w w [needle] v v v v v v v v v v v…");
}

#[test]
fn a_snippet_hides_long_unindexed_runs() {
    let q = Query::parse("key").unwrap();
    let text = format!("key {} end", "x".repeat(200));
    assert_eq!(q.snippet(&text), "[key] … end");
}

#[test]
fn may_match_lowercases_ascii_and_unicode_text_alike() {
    let q = Query::parse("kelvin déjà").unwrap();
    assert!(q.may_match("KELVIN and DÉJÀ"));
    assert!(q.may_match("\u{212A}elvin déjà"), "the Kelvin sign lowercases to an ASCII k");
    assert!(!q.may_match("KELVIN and DEJA"));
    let q = Query::parse("json").unwrap();
    assert!(q.may_match(r#"{"content":"JSON text"}"#));
    assert!(!q.may_match(r#"{"content":"JS ON"}"#));
    // At either end of the text, one byte short of it, and a word that is not ASCII.
    assert!(Query::parse("ab").unwrap().may_match("AB"));
    assert!(Query::parse("ab").unwrap().may_match("xaB"));
    assert!(!Query::parse("abc").unwrap().may_match("AB"));
    assert!(!Query::parse("été").unwrap().may_match("ETE ete"));
}

proptest::proptest! {
    /// Issue 47: a text scored where it lies scores as its lowercased words do.
    #[test]
    fn a_text_scores_as_its_words(
        text in "([a-cA-CéÉ\u{212A}]{1,3}[ ,.\"]){0,12}",
        query in "([a-cé]{1,2}\\*?|\"[a-c]{1,2} [a-c]{1,2}\"\\*?)( [a-c]{1,2}){0,2}",
    ) {
        let Ok(query) = Query::parse(&query) else { return Ok(()) };
        proptest::prop_assert_eq!(query.score_text(&text), query.score(&words(&text)));
        let ascii = text.replace(['é', 'É', '\u{212A}'], "b");
        proptest::prop_assert_eq!(query.score_text(&ascii), query.score(&words(&ascii)));
    }

    /// Issue 47: what a database indexes for a message is its words as `char`s make
    /// them, lowercased a character at a time, joined by spaces: an ASCII text's found
    /// byte by byte, and a word too long to index passed over before it is lowercased.
    #[test]
    fn a_message_indexes_its_words_as_characters_make_them(
        text in "([a-cA-C0-9ΣσÉ\u{212A}]{1,60}[ ,.\n-]){0,8}",
    ) {
        let expected = |text: &str| -> String {
            let words: Vec<String> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty() && w.len() <= MAX_WORD_BYTES)
                .map(|w| w.chars().flat_map(char::to_lowercase).collect())
                .collect();
            words.join(" ")
        };
        let ascii = text.replace(['Σ', 'σ', 'É', '\u{212A}'], "b");
        for text in [text.as_str(), ascii.as_str()] {
            let indexed = index_text(&Message::new(Role::User, json!(text)));
            proptest::prop_assert_eq!(indexed, expected(text));
        }
    }

    /// Issue 47: the scan's test of an ASCII text, made without a lowercased copy, says
    /// what a lowercased copy's `contains` says.
    #[test]
    fn ascii_text_is_tested_as_its_lowercased_copy(text in "[a-cA-C {}\":]{0,24}", word in "[a-c]{1,4}|é") {
        proptest::prop_assert_eq!(
            contains_ascii_lowercased(text.as_bytes(), word.as_bytes()),
            text.to_ascii_lowercase().contains(word.as_str())
        );
    }
}
