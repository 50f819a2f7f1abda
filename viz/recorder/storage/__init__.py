"""Where recordings are kept (stdlib only): `journal` (the file a recorded program
appends each compile to as it goes, and reads back), `recordings` (`Recordings`: the
recordings table of the history file; a JSON file; `rec:12`), `orphans` (journals of
killed recorders, found and stored).
"""
