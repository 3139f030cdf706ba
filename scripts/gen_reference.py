"""Write the generated reference pages of the docs site (config keys, CLI commands).

python scripts/gen_reference.py            # docs/reference/config.md and docs/reference/cli.md
python scripts/gen_reference.py --check    # exit 1 when a committed page is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pages() -> dict[Path, str]:
    from corl.cli.reference import cli_reference
    from corl.config.reference import config_reference

    return {ROOT / "docs/reference/config.md": config_reference(), ROOT / "docs/reference/cli.md": cli_reference()}


def main(argv: list[str]) -> int:
    stale = []
    for path, text in pages().items():
        if "--check" in argv:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    for path in stale:
        print(f"{path.relative_to(ROOT)} is out of date: run python scripts/gen_reference.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
