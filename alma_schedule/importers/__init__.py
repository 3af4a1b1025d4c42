"""Importers of the incumbents' dynamic schedules: django-celery-beat's tables (:mod:`.dcb`) and
RedBeat's Redis keys (:mod:`.redbeat`), each entry with its last run as the routine's cursor.

docs/architecture.md, section "The modules, in detail" (importers/).
"""
