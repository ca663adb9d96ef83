"""Render the published R2MED leaderboard alone as a static page (for the docs site), with the code of
`r2med leaderboard --html`: python scripts/render_published_leaderboard.py DIR  ->  DIR/index.html"""

from __future__ import annotations

import argparse
import sys

from r2med_plugin.reporting.leaderboard_page import write_published_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write index.html (new, empty, or an earlier page)")
    args = parser.parse_args(argv)
    try:
        print(f"wrote {write_published_page(args.folder)}")
    except ValueError as error:
        print(f"render_published_leaderboard: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
