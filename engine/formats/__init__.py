"""File formats read and written on both paths: Parquet (footers, metrics, writing) and Puffin
deletion vectors.
"""
