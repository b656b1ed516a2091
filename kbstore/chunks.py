"""Overlapping chunks of documents longer than the embedder's window.

An embedder reads at most ``max_tokens`` tokens (MiniLM 256, nomic 8192);
a document vector of a longer document never sees its tail. Such a
document also gets one vector per chunk: overlapping windows of its body,
each embedded as ``"{title}. {window}"`` so every chunk keeps its context.
Search takes a document's best vector (document or chunk) and builds the
snippet from the best-matching chunk.

Windows are counted in words (no tokenizer on the write path): WordPiece
and sentencepiece tokenizers make ~1.3 tokens of an English word, so a
window of ``WORDS_PER_TOKEN x max_tokens`` words (plus the title) stays
inside the model's window. What a document's chunks are made from (title,
body, window) is one hash, recorded like every other derived data.
"""

from __future__ import annotations

import re

from .model import text_hash

WORDS_PER_TOKEN = 0.6   # 256 tokens -> 153-word windows (~200 tokens + title)
OVERLAP = 0.25          # share of a window repeated at the start of the next
MAX_CHUNKS = 1024       # per document (a 150k-word document at MiniLM's window)
MIN_WINDOW_WORDS = 8

_WORD = re.compile(r"\S+")


def window_words(max_tokens: int | None) -> int | None:
    """Words per chunk for an embedder window; None: no chunking."""
    if max_tokens is None or max_tokens <= 0:
        return None
    return max(MIN_WINDOW_WORDS, int(max_tokens * WORDS_PER_TOKEN))


def chunk_spans(body: str, max_tokens: int | None) -> list[tuple[int, int]]:
    """(start, end) character offsets into ``body`` of its chunks, or [] when
    the body fits one window (the document vector covers it)."""
    size = window_words(max_tokens)
    if size is None:
        return []
    words = [(m.start(), m.end()) for m in _WORD.finditer(body)]
    if len(words) <= size:
        return []
    step = max(1, size - int(size * OVERLAP))
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(words) and len(spans) < MAX_CHUNKS:
        end = min(start + size, len(words))
        spans.append((words[start][0], words[end - 1][1]))
        if end == len(words):
            break
        start += step
    return spans


def chunk_text(title: str, body: str, span: tuple[int, int]) -> str:
    return f"{title}. {body[span[0]:span[1]]}"


def chunks_hash(title: str, body: str, max_tokens: int | None) -> str:
    """What a document's chunk vectors are made from."""
    return text_hash("chunks", str(window_words(max_tokens)), str(OVERLAP), title, body)
