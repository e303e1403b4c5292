"""The log's state: the typed events, their fold into table and catalog state, the store that loads
state from the log cheaply, and time travel to any log position.
"""
