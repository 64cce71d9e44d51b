"""The SQLite store: the file and its migrations, the store, the vault tables, the arrays the C kernel scans.
"""
