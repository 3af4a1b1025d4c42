"""The one home of our calls into the private parts of our dependencies (``docs/architecture.md``,
"Private calls into dependencies").

docs/architecture.md, section "The modules, in detail" (compat/__init__.py).
"""

from __future__ import annotations
