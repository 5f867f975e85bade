"""A byte-level BPE tokenizer in the GPT-2 / Qwen2 manner, trained here and written as the
Hugging Face tokenizers library's tokenizer.json: NFC normalizer, Qwen2's split regex (Isolated),
ByteLevel without its own regex, BPE merges learned by pair frequency, ByteLevel decoder."""
import collections
import heapq
import re
import sys
import unicodedata

# Qwen2/Qwen3's pre-tokenizer pattern, as tokenizer.json holds it (Oniguruma/PCRE syntax).
SPLIT_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Unicode's White_Space property, which \s means to Oniguruma and PCRE2 (Python's \s differs:
# it also takes U+001C..U+001F).
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
END_OF_TEXT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's map from each byte to a printable character (ByteLevel's alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


def _category_class(prefix):
    """A regex character class body holding every code point whose general category starts with
    prefix ("L" for \\p{L}, "N" for \\p{N}), as ranges."""
    ranges, start, last = [], None, None
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)).startswith(prefix):
            if start is None:
                start = cp
            last = cp
        elif start is not None:
            ranges.append((start, last))
            start = None
    if start is not None:
        ranges.append((start, last))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in ranges)


def python_split_regex():
    """SPLIT_PATTERN in Python's re syntax: \\p{L}, \\p{N} and \\s spelled out as classes."""
    letters, numbers = _category_class("L"), _category_class("N")
    pattern = SPLIT_PATTERN
    pattern = pattern.replace(r"[^\r\n\p{L}\p{N}]", f"[^\\r\\n{letters}{numbers}]")
    pattern = pattern.replace(r"[^\s\p{L}\p{N}]", f"[^{WHITE_SPACE}{letters}{numbers}]")
    pattern = pattern.replace(r"\p{L}", f"[{letters}]").replace(r"\p{N}", f"[{numbers}]")
    pattern = pattern.replace(r"\S", f"[^{WHITE_SPACE}]").replace(r"\s", f"[{WHITE_SPACE}]")
    assert "\\p" not in pattern
    return re.compile(pattern)


class PreTokenizer:
    """NFC, then the split regex; each piece as its byte-level string."""

    def __init__(self):
        self.regex = python_split_regex()
        self.byte_chars = bytes_to_unicode()

    def pieces(self, text):
        text = unicodedata.normalize("NFC", text)
        found = self.regex.findall(text)
        assert "".join(found) == text, "the split pattern left characters unmatched"
        return ["".join(self.byte_chars[b] for b in p.encode("utf-8")) for p in found]


def _merge_word(word, pair, merged):
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(merged)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


class _PairTable:
    """Pair counts over the distinct words, the words each pair occurs in, and a heap of
    (-count, pair) with stale entries skipped on pop."""

    def __init__(self, words, freqs):
        self.words, self.freqs = words, freqs
        self.counts = collections.Counter()
        self.where = collections.defaultdict(set)
        for i, w in enumerate(words):
            self._add(i, w, +1)
        self.heap = [(-c, p) for p, c in self.counts.items()]
        heapq.heapify(self.heap)

    def _add(self, i, word, sign):
        for pair in zip(word, word[1:]):
            self.counts[pair] += sign * self.freqs[i]
            if sign > 0:
                self.where[pair].add(i)

    def best(self):
        """The most frequent pair (ties: the smallest pair), or None."""
        while self.heap:
            neg, pair = heapq.heappop(self.heap)
            if self.counts.get(pair, 0) == -neg and -neg > 0:
                return pair, -neg
        return None

    def merge(self, pair):
        merged = pair[0] + pair[1]
        touched = set()
        for i in self.where.pop(pair, ()):
            word = self.words[i]
            new = _merge_word(word, pair, merged)
            if len(new) == len(word):
                continue
            self._add(i, word, -1)
            self._add(i, new, +1)
            touched.update(zip(word, word[1:]))
            touched.update(zip(new, new[1:]))
            self.words[i] = new
        for p in touched:
            c = self.counts[p]
            if c > 0:
                heapq.heappush(self.heap, (-c, p))
            else:
                del self.counts[p]


def train(word_counts, vocab_size, log=print):
    """Merges learned from {byte-level word: count} until the vocabulary (256 bytes, one token
    per distinct merge result, then SPECIAL_TOKENS) has vocab_size ids."""
    target = vocab_size - len(SPECIAL_TOKENS)
    keys = sorted(word_counts)
    table = _PairTable([list(k) for k in keys], [word_counts[k] for k in keys])
    tokens = set(bytes_to_unicode().values())
    merges = []
    while len(tokens) < target:
        found = table.best()
        if found is None or found[1] < 2:
            raise SystemExit(f"the corpus ran out of pairs at {len(tokens)} tokens")
        pair, count = found
        merges.append(pair)
        tokens.add(pair[0] + pair[1])
        table.merge(pair)
        if len(merges) % 500 == 0:
            log(f"bpe: {len(merges)} merges, {len(tokens)} tokens, last {pair} x{count}")
    return merges


class Tokenizer:
    """Encodes and decodes as tokenizer.json (tokenizer_json()) tells the library to."""

    def __init__(self, merges):
        self.pre = PreTokenizer()
        self.merges = merges
        byte_chars = bytes_to_unicode()
        self.vocab = {byte_chars[b]: b for b in range(256)}
        for a, b in merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        for s in SPECIAL_TOKENS:
            self.vocab[s] = len(self.vocab)
        self.ranks = {pair: r for r, pair in enumerate(merges)}
        self.inverse = {i: t for t, i in self.vocab.items()}
        self.byte_of = {c: b for b, c in byte_chars.items()}
        self.cache = {}

    @property
    def size(self):
        return len(self.vocab)

    def special_id(self, token):
        return self.vocab[token]

    def _bpe(self, piece):
        parts = list(piece)
        while len(parts) > 1:
            ranked = [(self.ranks.get(p, len(self.ranks)), p) for p in zip(parts, parts[1:])]
            rank, pair = min(ranked)
            if rank == len(self.ranks):
                break
            parts = _merge_word(parts, pair, pair[0] + pair[1])
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        """Ids of text, which must hold no special token (the corpus holds none)."""
        ids = []
        for piece in self.pre.pieces(text):
            cached = self.cache.get(piece)
            if cached is None:
                cached = self._bpe(piece)
                if len(self.cache) < 1_000_000:
                    self.cache[piece] = cached
            ids.extend(cached)
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            token = self.inverse[i]
            if token in SPECIAL_TOKENS:
                out += token.encode()
            else:
                out += bytes(self.byte_of[c] for c in token)
        return out.decode("utf-8", errors="replace")
