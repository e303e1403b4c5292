"""The read path: scan planning, the derived file index and its blocks, reading data files with
their deletes applied, and the metadata tables (``inspect``).
"""
