"""The sans-IO layer: the record codec, names on disk and retention decisions. No files, no clock."""
