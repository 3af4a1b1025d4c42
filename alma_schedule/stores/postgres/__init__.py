"""The PostgreSQL backend: what exists only for PostgreSQL's speed, as the portable
:class:`~alma_schedule.stores.sql.SqlStore`'s driver (:class:`.driver.PostgresDriver`, chosen by
:func:`.driver.driver_for` for a ``postgresql`` URL) and its modules :mod:`.hot`, :mod:`.ahead`
and :mod:`.tick_end` (docs/architecture.md, section "The portable store and PostgreSQL's speed")."""
