"""The run directory's room: where every file of a run and of an attempt lives, and the
documents kept there (results, event logs, the manifest, disclosures, the audit's
verdict), read and written in one place."""
