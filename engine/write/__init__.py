"""The write path: data files from Arrow rows (partitioned, sorted, z-ordered), delete files, and the
checks on files written elsewhere before they are appended.
"""
