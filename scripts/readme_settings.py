"""Regenerate the README's configuration reference from the Settings fields (run after adding one)."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from pathlib import Path

from alma_schedule.settings import Settings, env_name

BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"


def table() -> str:
    rows = ["| setting | env var | default | what |", "|---|---|---|---|"]
    for f in dataclasses.fields(Settings):
        if f.metadata.get("kind") == "code":
            continue
        d = f.default
        if "default_text" in f.metadata:
            text = f.metadata["default_text"]
        elif isinstance(d, timedelta):
            s = d.total_seconds()
            text = f"{int(s)}s" if s == int(s) else f"{s}s"
        else:
            text = "(none)" if d is None else str(d)
        rows.append(f"| `{f.name}` | `{env_name(f.name)}` | `{text}` | {f.metadata['doc'].replace('|', '/')} |")
    return "\n".join(rows)


def main() -> None:
    path = Path(__file__).resolve().parents[1] / "README.md"
    text = path.read_text(encoding="utf-8")
    new = re.sub(f"{BEGIN}.*?{END}", f"{BEGIN}\n{table()}\n{END}", text, flags=re.S)
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main()
