"""The storage seam: what every index backend (a package such as `adapters/sqlite`,
`adapters/postgres`) implements and shares, and the registry that picks one for a location.

- `backend`: the `Backend` value an opened index is, its port protocols and `TABLES`.
- `registry`: the backend kinds, keyed by location, and `open_backend`.
- `sql_*`: statements and row decoders the SQL backends share (SQLite's `?` placeholders).

Nothing is imported here: a `qmd` start pays only for the modules it uses."""
