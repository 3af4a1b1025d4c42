"""The fake OpenAI server's wire helpers: its deterministic tokenizer and replies, and multipart parsing.

Kept apart from :mod:`alma_schedule.testing.fake_openai` (the ASGI app) so each stays small.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import math
from typing import Any

__all__ = ["TOKENS_PER_WORD", "count_tokens", "default_reply", "parse_multipart", "prompt_tokens"]

TOKENS_PER_WORD = 1.3
_FILLER = (
    "the overnight numbers look steady and nothing needs your attention before the standup "
    "three pull requests await review and the deploy window opens at ten"
).split()


def count_tokens(text: str) -> int:
    """The fake's tokenizer: ``ceil(words * 1.3)``."""
    words = len(text.split())
    return math.ceil(words * TOKENS_PER_WORD - 1e-9)


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Prompt tokens of a chat request: each message's content, plus 3 per message, plus 3."""
    total = 3
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        total += 3 + count_tokens(str(content))
    return total


def default_reply(prompt: str, seq: int, words: int) -> str:
    """A deterministic reply of ``words`` words that names the completion's sequence number."""
    head = ["Reply", f"#{seq}:", *prompt.split()[:6]]
    body = [w for _, w in zip(range(max(0, words - len(head))), itertools.cycle(_FILLER), strict=False)]
    return " ".join((head + body)[:words])


def parse_multipart(content_type: str, raw: bytes) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """Parse a multipart/form-data body with the standard library: (text fields, files)."""
    form: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    if not content_type.startswith("multipart/form-data"):
        return form, files
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = (filename, data)
        else:
            form[name] = data.decode()
    return form, files
