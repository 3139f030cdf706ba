"""mkdocs hook (mkdocs.yml `hooks:`): the site's readme.md page is the project's README.md.

The README is the repository's front page, outside docs/; its links point into docs/ from the
repository's root. The site shows it as it is, with those links made the site's own
(`docs/runs.md` -> `runs.md`), so that strict link checking covers them too.
"""

from __future__ import annotations

import re
from pathlib import Path

PAGE = "readme.md"


def on_page_read_source(page, config) -> str | None:
    if page.file.src_uri != PAGE:
        return None
    text = (Path(config.config_file_path).parent / "README.md").read_text(encoding="utf-8")
    return re.sub(r"\]\(docs/", "](", text)
