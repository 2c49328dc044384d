//! The one rule of what a search matches, and the words a text is indexed under.
//!
//! A text is lowercased and cut into runs of letters and digits; everything else separates
//! them. A run of a script written without spaces (Han, kana, Hangul) is indexed by its
//! overlapping pairs of characters, any other run as one word. A query is cut the same way and
//! matches a text when each of its words begins some word of the text and each of its runs
//! without spaces occurs in the text: "lunch" finds "Lunch?" and "lunchtime", "你好" finds
//! "我说你好". Words are indexed per owner (table message_words), so that a search reads only
//! the owner's entries for one word, newest first.

use std::collections::BTreeSet;

/// Longest prefix of a word the index keys hold; a longer query word is looked up by this
/// prefix and checked in full against the text.
pub const MAX_KEY_CHARS: usize = 32;
/// Shortest word (outside scripts without spaces) that may lead a search: a shorter prefix
/// spans too many of the owner's words.
pub const MIN_LEAD_CHARS: usize = 3;

/// Whether `c` belongs to a script written without spaces between words, searched by
/// substrings rather than words.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3400..=0x4DBF   // CJK Extension A
        | 0x4E00..=0x9FFF   // CJK Unified Ideographs
        | 0xAC00..=0xD7AF   // Hangul syllables
        | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
        | 0x20000..=0x3FFFF // CJK Extensions B and later
    )
}

/// One piece of a text or query: a word, or a run of a script without spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Word(String),
    Unspaced(String),
}

/// The pieces of `text`, lowercased, in order.
fn pieces(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut current: Option<Piece> = None;
    for c in text.chars().flat_map(char::to_lowercase) {
        let next_kind = match (c.is_alphanumeric(), unspaced(c)) {
            (false, _) => None,
            (true, true) => Some(true),
            (true, false) => Some(false),
        };
        match (&mut current, next_kind) {
            (Some(Piece::Unspaced(run)), Some(true)) | (Some(Piece::Word(run)), Some(false)) => {
                run.push(c)
            }
            (_, kind) => {
                out.extend(current.take());
                current = kind.map(|unspaced| match unspaced {
                    true => Piece::Unspaced(c.to_string()),
                    false => Piece::Word(c.to_string()),
                });
            }
        }
    }
    out.extend(current);
    out
}

fn key(s: &str) -> String {
    s.chars().take(MAX_KEY_CHARS).collect()
}

/// The keys `text` is indexed under: each word (its first [`MAX_KEY_CHARS`] characters), and
/// each pair of neighbouring characters of a run without spaces (the character itself for a
/// run of one). Sorted, each once.
pub fn index_keys(text: &str) -> Vec<String> {
    let mut keys = BTreeSet::new();
    for piece in pieces(text) {
        match piece {
            Piece::Word(w) => {
                keys.insert(key(&w));
            }
            Piece::Unspaced(run) => {
                let chars: Vec<char> = run.chars().collect();
                if chars.len() == 1 {
                    keys.insert(run);
                } else {
                    keys.extend(chars.windows(2).map(|w| w.iter().collect::<String>()));
                }
            }
        }
    }
    keys.into_iter().collect()
}

/// A search query, cut into the pieces a text must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryWords {
    pieces: Vec<Piece>,
    /// The index key prefix the search reads: the most selective piece's.
    lead: String,
}

/// Why a query cannot be searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryRefused {
    /// No letters or digits at all.
    Empty,
    /// No word of [`MIN_LEAD_CHARS`] or more, and no run without spaces.
    TooShort,
}

impl QueryWords {
    pub fn parse(query: &str) -> Result<Self, QueryRefused> {
        let pieces = pieces(query);
        // A run without spaces leads by its first pair (or its one character): any of its
        // pairs is rarer than a short word. Otherwise the longest word leads.
        let lead = pieces
            .iter()
            .map(|p| match p {
                Piece::Unspaced(run) => (usize::MAX, run.chars().take(2).collect::<String>()),
                Piece::Word(w) => (w.chars().count(), key(w)),
            })
            .max_by_key(|(weight, _)| *weight);
        match lead {
            None => Err(QueryRefused::Empty),
            Some((weight, _)) if weight < MIN_LEAD_CHARS => Err(QueryRefused::TooShort),
            Some((_, lead)) => Ok(Self { pieces, lead }),
        }
    }

    /// The prefix of the index keys the search reads.
    pub fn lead(&self) -> &str {
        &self.lead
    }

    /// The first string after every key that begins with [`Self::lead`], in the index's
    /// code point order. (A lead is letters and digits, so its last character is never the
    /// last code point; past it, the last code point stands for the end.)
    pub fn lead_end(&self) -> String {
        let mut chars: Vec<char> = self.lead.chars().collect();
        while let Some(last) = chars.pop() {
            if let Some(next) = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32) {
                chars.push(next);
                return chars.into_iter().collect();
            }
        }
        char::MAX.to_string()
    }

    /// Whether `text` matches: each word of the query begins a word of the text, and each
    /// run without spaces occurs in it.
    pub fn matches(&self, text: &str) -> bool {
        let text_pieces = pieces(text);
        self.pieces.iter().all(|q| match q {
            Piece::Word(w) => text_pieces
                .iter()
                .any(|t| matches!(t, Piece::Word(tw) if tw.starts_with(w.as_str()))),
            Piece::Unspaced(run) => text_pieces
                .iter()
                .any(|t| matches!(t, Piece::Unspaced(tr) if tr.contains(run.as_str()))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_indexed_by_words_and_pairs() {
        let cases: [(&str, &[&str]); 6] = [
            (
                "Hello Bob, lunch today?",
                &["bob", "hello", "lunch", "today"],
            ),
            ("100% sure_thing", &["100", "sure", "thing"]),
            ("hello HELLO héllo", &["hello", "héllo"]),
            ("我说你好", &["你好", "我说", "说你"]),
            ("猫 and 犬犬", &["and", "犬犬", "猫"]),
            ("Straße", &["straße"]),
        ];
        for (text, keys) in cases {
            assert_eq!(index_keys(text), keys, "text {text:?}");
        }
        let long = "a".repeat(100);
        assert_eq!(index_keys(&long), ["a".repeat(MAX_KEY_CHARS)]);
        assert!(index_keys("?! ...").is_empty());
    }

    #[test]
    fn queries_match_word_beginnings_and_unspaced_substrings() {
        // (query, text, matches)
        let cases = [
            ("lunch", "Hello Bob, lunch today?", true),
            ("LUNCH", "lunchtime!", true),
            ("unch", "lunch", false),
            ("hello lunch", "Lunch, hello", true),
            ("hello lunch", "hello there", false),
            ("sure_thing", "100% sure thing", true),
            ("你好", "我说你好", true),
            ("说你", "我说你好", true),
            ("你我", "我说你好", false),
            ("好 bob", "你好 Bobby", true),
            ("héllo", "HÉLLO world", true),
            (&"x".repeat(40), &"x".repeat(40), true),
            (&"x".repeat(40), &"x".repeat(39), false),
        ];
        for (query, text, expected) in cases {
            let q = QueryWords::parse(query).unwrap_or_else(|e| panic!("{query:?}: {e:?}"));
            assert_eq!(q.matches(text), expected, "query {query:?} on {text:?}");
        }
    }

    #[test]
    fn queries_lead_by_their_most_selective_piece() {
        // (query, lead, its end)
        let cases = [
            ("lunch at noon", "lunch", "lunci"),
            ("at noon", "noon", "nooo"),
            ("ab 你好吗", "你好", "你奾"),
            ("猫", "猫", "猬"),
            (
                &"y".repeat(40),
                &"y".repeat(MAX_KEY_CHARS),
                &format!("{}z", "y".repeat(31)),
            ),
        ];
        for (query, lead, end) in cases {
            let q = QueryWords::parse(query).unwrap_or_else(|e| panic!("{query:?}: {e:?}"));
            assert_eq!((q.lead(), q.lead_end().as_str()), (lead, end), "{query:?}");
        }
    }

    #[test]
    fn queries_without_a_lead_are_refused() {
        let cases = [
            ("...", QueryRefused::Empty),
            ("!?", QueryRefused::Empty),
            ("ab", QueryRefused::TooShort),
            ("a b c", QueryRefused::TooShort),
            ("0% s", QueryRefused::TooShort),
        ];
        for (query, refused) in cases {
            assert_eq!(QueryWords::parse(query), Err(refused), "{query:?}");
        }
    }
}
