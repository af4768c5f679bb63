#!/usr/bin/env python3
"""Checks the built book's internal links offline: every relative link of every page
of docs/book leads to a file of the book, and every #anchor to an id on its page.
External links (http:, https:, mailto:) are not followed; the links inside the API
reference (api.html, Redocly's single-page app) are its own. Exits 1 listing what is
broken. Usage: scripts/check-links.py [BOOK_DIR]"""

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key) and tag in ("a", "img", "link", "script"):
                self.links.append(attrs[key])


def main():
    book = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "docs/book")
    pages = {}
    for folder, _, names in os.walk(book):
        for name in names:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                page = Page()
                with open(path, encoding="utf-8") as f:
                    page.feed(f.read())
                pages[path] = page
    if not pages:
        sys.exit(f"no pages under {book}: build the book first (mdbook build docs)")
    broken, checked = [], 0
    for path, page in sorted(pages.items()):
        if os.path.relpath(path, book) == "api.html":
            continue
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//") or link.startswith("data:"):
                continue
            checked += 1
            target = path if not parts.path else os.path.normpath(
                os.path.join(os.path.dirname(path), unquote(parts.path)))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            where = f"{os.path.relpath(path, book)}: {link}"
            if not os.path.exists(target):
                broken.append(f"{where} (no such file)")
            elif parts.fragment and target.endswith(".html"):
                if unquote(parts.fragment) not in pages[target].ids:
                    broken.append(f"{where} (no such anchor)")
    if broken:
        print("broken links in the book:\n  " + "\n  ".join(broken))
        sys.exit(1)
    print(f"the book's links: {checked} internal links of {len(pages)} pages, all found")


if __name__ == "__main__":
    main()
