"""The training text: the HTML pages of Debian's python3.11-doc package (the Python 3.11
documentation, PSF License Version 2), turned into plain text and split into train and held-out
sets by document."""
import hashlib
import html.parser
import os
import re

DOC_ROOT = "/usr/share/doc/python3.11/html"
DOC_PACKAGE = "python3.11-doc"
# Pages that hold links and indexes rather than prose.
SKIPPED_PAGES = {"contents.html", "index.html", "search.html", "py-modindex.html",
                 "download.html"}
# One document in HELD_OUT_MODULUS (by a hash of its path) is held out, so the split depends on
# nothing but the document's name.
HELD_OUT_MODULUS = 20

BLOCK_TAGS = {"p", "div", "section", "h1", "h2", "h3", "h4", "h5", "h6", "table", "blockquote",
              "dl", "ul", "ol", "figure", "figcaption", "caption"}
LINE_TAGS = {"li", "dt", "dd", "tr", "br"}
SKIPPED_TAGS = {"script", "style"}


class _BodyText(html.parser.HTMLParser):
    """The text of a Sphinx page's main body (div.body): whitespace collapsed outside <pre>,
    kept inside it, a blank line between blocks, and no permalink marks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts = []
        self.body_depth = 0  # open divs inside div.body; 0 outside it
        self.skip_depth = 0  # open elements whose text is dropped
        self.pre_depth = 0
        self.pending_newlines = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if not self.body_depth:
            if tag == "div" and attrs.get("role") == "main":
                self.body_depth = 1
            return
        if tag == "div":
            self.body_depth += 1
        if self.skip_depth or tag in SKIPPED_TAGS or "headerlink" in (attrs.get("class") or ""):
            if tag not in ("br", "img", "hr", "wbr"):
                self.skip_depth += 1
            return
        self._tag_break(tag)
        if tag == "pre":
            self.pre_depth += 1

    def handle_endtag(self, tag):
        if not self.body_depth:
            return
        if self.skip_depth:
            self.skip_depth -= 1
        else:
            if tag == "pre":
                self.pre_depth = max(0, self.pre_depth - 1)
            self._tag_break(tag)
        if tag == "div":
            self.body_depth -= 1

    def handle_data(self, data):
        if not self.body_depth or self.skip_depth:
            return
        if self.pre_depth:
            self._emit(data, raw=True)
        else:
            self._emit(re.sub(r"\s+", " ", data), raw=False)

    def _tag_break(self, tag):
        if tag in BLOCK_TAGS or tag == "pre":
            self.pending_newlines = max(self.pending_newlines, 2)
        elif tag in LINE_TAGS:
            self.pending_newlines = max(self.pending_newlines, 1)

    def _emit(self, text, raw):
        at_line_start = not self.parts or self.parts[-1].endswith("\n") or self.pending_newlines
        if not raw and at_line_start:
            text = text.lstrip(" ")
        elif not raw and self.parts and self.parts[-1].endswith(" "):
            text = text.lstrip(" ")
        if not text:
            return
        if self.pending_newlines:
            if self.parts:
                self.parts[-1] = self.parts[-1].rstrip(" \n")
                self.parts.append("\n" * self.pending_newlines)
            self.pending_newlines = 0
        self.parts.append(text)

    def text(self):
        lines = "".join(self.parts).split("\n")
        text = "\n".join(line.rstrip() for line in lines)
        return re.sub(r"\n{3,}", "\n\n", text).strip()


def page_text(path):
    """The plain text of one documentation page."""
    parser = _BodyText()
    with open(path, encoding="utf-8") as f:
        parser.feed(f.read())
    parser.close()
    return parser.text()


def document_paths(root=DOC_ROOT):
    """Every prose page below root, as paths relative to it, sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("_"))
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), root)
            if not name.endswith(".html") or rel in SKIPPED_PAGES or name.startswith("genindex"):
                continue
            out.append(rel)
    return sorted(out)


def is_held_out(rel_path):
    digest = hashlib.sha256(rel_path.encode()).digest()
    return int.from_bytes(digest[:4], "little") % HELD_OUT_MODULUS == 0


def load_documents(root=DOC_ROOT):
    """(train, held_out): lists of (relative path, text), in path order, empty pages dropped."""
    if not os.path.isdir(root):
        raise SystemExit(f"{root} is missing: install it with `apt-get install -y {DOC_PACKAGE}`")
    train, held_out = [], []
    for rel in document_paths(root):
        text = page_text(os.path.join(root, rel))
        if text:
            (held_out if is_held_out(rel) else train).append((rel, text))
    return train, held_out


def held_out_sample(held_out, max_bytes):
    """Whole paragraphs of the held-out documents, in order, up to max_bytes of UTF-8: the sample
    committed beside the model for its perplexity test."""
    out, size = [], 0
    for _, text in held_out:
        for paragraph in text.split("\n\n"):
            n = len(paragraph.encode()) + 2
            if size + n > max_bytes:
                return "\n\n".join(out) + "\n"
            out.append(paragraph)
            size += n
    return "\n\n".join(out) + "\n"


def notice():
    """The NOTICE written beside the models: where their training text and heldout.txt come
    from, the PSF's copyright notice and the PSF License Agreement (with the Zero-Clause BSD
    licence of the documentation's code), as the agreement asks derivative works to keep."""
    text = page_text(os.path.join(DOC_ROOT, "license.html"))
    psf = text[text.index("PSF LICENSE AGREEMENT FOR PYTHON"):
               text.index("BEOPEN.COM LICENSE AGREEMENT")].strip()
    bsd = text[text.index("ZERO-CLAUSE BSD LICENSE"):
               text.rindex("Licenses and Acknowledgements for Incorporated Software")].strip()
    return (
        "The models in this directory (target/, draft/) were trained by\n"
        "scripts/train_default_pair.py on the Python 3.11 documentation as Debian's\n"
        f"{DOC_PACKAGE} package ships it (the HTML pages under\n{DOC_ROOT}).\n"
        "heldout.txt is an excerpt of that documentation. Changes made: the HTML pages were\n"
        "converted to plain text (markup, navigation and permalink marks removed, whitespace\n"
        "collapsed outside code blocks), and heldout.txt keeps whole paragraphs of a few\n"
        "held-out pages only.\n\n"
        "Python and its documentation are Copyright (c) 2001-2023 Python Software Foundation;\n"
        "All Rights Reserved. They are licensed under the PSF License Agreement below; the\n"
        "examples, recipes and other code in the documentation are dual licensed under it and\n"
        "the Zero-Clause BSD licence below.\n\n" + psf + "\n\n" + bsd + "\n")
