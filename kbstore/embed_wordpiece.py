"""MiniLM's BERT WordPiece tokenisation of one query, in plain Python.

A search embeds one short text. Importing the ``tokenizers`` package and
building its tokenizer from the shipped 466 KB ``tokenizer.json`` cost a
first query more than tokenising ever does (measured in
benchmarks/results/first_query.md); this module reads the vocabulary from a
small text file in the cache directory (written once from tokenizer.json)
and tokenises in a fraction of a millisecond.

It reproduces the shipped tokenizer exactly -- BertNormalizer (clean text,
Chinese characters spaced, accents stripped, lower case), BertPreTokenizer
(split on whitespace, punctuation isolated), WordPiece (greedy longest match,
``##`` continuations, [UNK] for a word that does not split or is longer than
100 characters), ``[CLS] ... [SEP]``, truncation -- but only for text it was
checked on: characters up to U+017F (ASCII, Latin-1, Latin Extended-A) and no
special-token text such as ``[MASK]``. For anything else :meth:`encode`
returns None and the caller uses the ``tokenizers`` package, so the ids never
depend on which path ran (tests/integration compares both).

Documents are tokenised in bulk by ``tokenizers`` (it is faster per text).
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

# The tokenizer.json settings this module implements; any other file makes
# load() return None.
EXPECTED_NORMALIZER = {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True}
EXPECTED_PRE_TOKENIZER = {"type": "BertPreTokenizer"}
# Highest code point checked against the tokenizers package, character by
# character (tests/integration/test_minilm_query_tokens.py).
CHECKED_UP_TO = 0x17F
VOCAB_FORMAT = 1


class QueryTokenizer:
    """Token ids of one text, the shipped tokenizer's way (see module doc)."""

    def __init__(self, vocab: dict[str, int], special: dict[str, int], *,
                 max_word_chars: int = 100, max_tokens: int = 256) -> None:
        self.vocab = vocab
        self.special = special
        self.unk, self.cls, self.sep = special["[UNK]"], special["[CLS]"], special["[SEP]"]
        self.max_word_chars = max_word_chars
        self.max_tokens = max_tokens

    def encode(self, text: str) -> list[int] | None:
        """``[CLS] ids [SEP]`` truncated to max_tokens, or None when the text
        is outside what this tokenizer was checked on."""
        if any(ord(c) > CHECKED_UP_TO for c in text):
            return None
        if "[" in text and any(token in text for token in self.special):
            return None  # the shipped tokenizer maps special-token text to its id
        ids: list[int] = []
        room = self.max_tokens - 2
        for word in _words(_normalize(text)):
            ids.extend(self._wordpiece(word))
            if len(ids) >= room:
                break
        return [self.cls, *ids[:room], self.sep]

    def _wordpiece(self, word: str) -> list[int]:
        if len(word) > self.max_word_chars:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk]  # like WordPiece: the whole word is unknown
            pieces.append(found)
            start = end
        return pieces


# Rust's char::is_whitespace (Unicode White_Space) within the checked range;
# str.isspace() differs (it includes U+001C-U+001F).
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0")
_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def _normalize(text: str) -> str:
    # clean_text: drop NUL, U+FFFD and control characters (not \t \n \r),
    # then whitespace becomes a space. Chinese characters are above the range.
    kept = []
    for c in text:
        if c in "\t\n\r":
            kept.append(" ")
        elif c == "\x00" or unicodedata.category(c)[0] == "C":
            continue
        else:
            kept.append(" " if c in _WHITESPACE else c)
    # strip_accents (None: follows lowercase): NFD, then drop nonspacing marks;
    # lower case after, as BertNormalizer does.
    decomposed = unicodedata.normalize("NFD", "".join(kept))
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn").lower()


def _words(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for c in text:
        if c in _WHITESPACE:
            if current:
                words.append("".join(current))
                current = []
        elif c in _ASCII_PUNCTUATION or unicodedata.category(c)[0] == "P":
            if current:
                words.append("".join(current))
                current = []
            words.append(c)
        else:
            current.append(c)
    if current:
        words.append("".join(current))
    return words


def vocab_from_tokenizer_json(data: bytes) -> tuple[list[str], dict[str, int]] | None:
    """The vocabulary by id and the special tokens of a tokenizer.json, or
    None if it is not the configuration this module implements."""
    config = json.loads(data)
    model = config.get("model") or {}
    if (config.get("normalizer") != EXPECTED_NORMALIZER
            or config.get("pre_tokenizer") != EXPECTED_PRE_TOKENIZER
            or model.get("type") != "WordPiece"
            or model.get("continuing_subword_prefix") != "##"
            or model.get("max_input_chars_per_word") != 100
            or model.get("unk_token") != "[UNK]"):
        return None
    vocab: dict[str, int] = model.get("vocab") or {}
    by_id = sorted(vocab, key=vocab.__getitem__)
    if [vocab[t] for t in by_id] != list(range(len(by_id))) or any(
            "\n" in t or "\r" in t for t in by_id):
        return None
    special = {t["content"]: t["id"] for t in config.get("added_tokens") or ()}
    if not {"[UNK]", "[CLS]", "[SEP]"} <= special.keys() or any(
            vocab.get(t) != i for t, i in special.items()):
        return None
    return by_id, special


def load(tokenizer_file: Path, cache_file: Path, max_tokens: int) -> QueryTokenizer | None:
    """The query tokenizer, from ``cache_file`` (one token per line, by id;
    written from ``tokenizer_file`` when missing), or None if tokenizer.json
    is not what this module implements."""
    try:
        lines = cache_file.read_text(encoding="utf-8").split("\n")
    except OSError:
        lines = []
    if len(lines) < 3 or lines[0] != f"kbstore-vocab {VOCAB_FORMAT}":
        built = vocab_from_tokenizer_json(tokenizer_file.read_bytes())
        if built is None:
            return None
        by_id, special = built
        lines = [f"kbstore-vocab {VOCAB_FORMAT}", json.dumps(special), *by_id]
        try:
            from .embed_cache import write_atomically

            write_atomically(cache_file, "\n".join(lines).encode("utf-8"))
        except OSError:
            pass  # an unwritable cache: read tokenizer.json again next time
    vocab = {token: i for i, token in enumerate(lines[2:])}
    return QueryTokenizer(vocab, json.loads(lines[1]), max_tokens=max_tokens)
