"""The ``skyjoin dbscan`` command (``cli``); DBSCAN itself is ``skyjoin.dbscan``."""
