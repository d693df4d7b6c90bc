"""What people see: the run report's terminal tables (``report.py``), its HTML page and
chart (``runpage.py``, ``runchart.py``) and the column fitter every terminal table uses
(``columns.py``). It sits above ``engine/``: the engine computes a run and its report as
data, and nothing here changes what it draws."""
