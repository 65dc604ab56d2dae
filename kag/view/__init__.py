"""`kag view`: the index of a result tree (``index``), the queries the pages make (``query``)
and the local HTTP server that serves them (``server``)."""
