"""Streamlit pieces shared by the pages, one module per concern. Layout only: numbers
and graphs come from `viz` as plain data; nothing here imports jax.

- `navigation`: leaving Streamlit's legacy pages/ mode, opening the diff view;
- `workers`: the server's worker pool and this session's requests;
- `program`: the current program shared by every page, samples, spec rows;
- `sidebar`: device picker, worker status, notices;
- `cards`: error cards, code excerpts, the report download;
- `graphs`: graph panels and the pan-and-zoom frame;
- `lessons`: the lesson pages' run/cancel controls;
- `editor`: the code editor and its marked lines; `fusion`: the Fusion tab's map views;
  `memory`: the Memory tab (the peak, its buffers, what would lower it);
- `inputs`: Explore's left column (the sample, the inputs folded into one line, the
  editor); `follow`: a line followed through every IR, and a kernel's lines marked;
- `live`: an analysis drawn stage by stage while it runs;
- `tables`: every table, its cells read through `viz.units.table`; `style`: the
  layout rules every page shares (CSS).

Pages use the names re-exported here (`ui.ask`, `ui.graph_panel`, ...).
"""

from ui.cards import error_card, excerpt, report_json, stamp
from ui.graphs import (
    IR_TITLES,
    fusion_compare,
    graph_panel,
    node_details,
    shared_box,
    show_graph,
)
from ui.lessons import (
    explored_function,
    lesson_controls,
    load_sample_button,
    show_lesson_error,
)
from ui.live import LiveAnalysis
from ui.navigation import leave_legacy_pages, open_diff
from ui.program import (
    functions_of,
    open_program,
    params_of,
    program,
    program_from_sample,
    reset_inputs,
    sample_names,
    samples_by_title,
)
from ui.sidebar import (
    device_picker,
    end_page,
    restarted_elsewhere,
    safety_notes,
    worker_status,
)
from ui.style import page_style
from ui.tables import table
from ui.workers import (
    ask,
    device,
    lesson_worker,
    owner,
    pool,
    run_lesson,
    start_with_server,
    start_workers,
    worker,
)
from viz.program import join_spec, spec_rows
from viz.units import count, nbytes, seconds, si

__all__ = [
    "IR_TITLES",
    "LiveAnalysis",
    "ask",
    "count",
    "device",
    "device_picker",
    "end_page",
    "error_card",
    "excerpt",
    "explored_function",
    "functions_of",
    "fusion_compare",
    "graph_panel",
    "join_spec",
    "leave_legacy_pages",
    "lesson_controls",
    "lesson_worker",
    "load_sample_button",
    "nbytes",
    "node_details",
    "open_diff",
    "open_program",
    "owner",
    "page_style",
    "params_of",
    "pool",
    "program",
    "program_from_sample",
    "report_json",
    "reset_inputs",
    "restarted_elsewhere",
    "run_lesson",
    "safety_notes",
    "sample_names",
    "samples_by_title",
    "seconds",
    "shared_box",
    "show_graph",
    "show_lesson_error",
    "si",
    "spec_rows",
    "stamp",
    "start_with_server",
    "start_workers",
    "table",
    "worker",
    "worker_status",
]
