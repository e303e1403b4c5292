"""Taking over existing Iceberg tables: their metadata read into events (the importer) and the
registration that commits them.
"""
