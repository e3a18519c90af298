"""The conformance check of a live connector (``trio-relay conformance``): the link it
drives by hand (``link.py``), the script of checks (``check.py``) and the command
(``command.py``)."""
