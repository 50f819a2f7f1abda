"""jitscope: see what jax.jit does to your function. `streamlit run app.py`.

This file has two roles. `streamlit run app.py` imports it as a module to find the
server's `st.App`: that import starts the workers, and the app's start-up leaves
Streamlit's legacy pages/ mode (the first visitor should wait neither for JAX to
import nor for a rerun); each browser session then runs it as the script
(`__main__`): navigation and sidebar.
"""

import streamlit as st

import ui

if __name__ != "__main__":  # imported by `streamlit run`: the server
    ui.start_workers()
    app = st.App(__file__, lifespan=ui.start_with_server)
else:  # a session's run
    ui.pool()  # built at the server's start; without a server (AppTest), here, first
    ui.leave_legacy_pages(in_app=True)  # Streamlit's pages/ folder mode: see ui.leave_legacy_pages
    st.set_page_config(page_title="jitscope", page_icon=":material/biotech:", layout="wide")

    navigation = st.navigation(
        {
            "Compile": [
                st.Page(
                    "pages/explore.py", title="Explore", icon=":material/biotech:", default=True
                ),
                st.Page("pages/cache.py", title="Cache lab", icon=":material/cached:"),
            ],
            "Runs": [
                st.Page("pages/history.py", title="History", icon=":material/history:"),
                st.Page("pages/diff.py", title="Diff", icon=":material/difference:"),
                st.Page(
                    "pages/recordings.py",
                    title="Recordings",
                    icon=":material/radio_button_checked:",
                ),
            ],
            "Lessons": [
                st.Page("pages/placement.py", title="Where to jit", icon=":material/place:"),
                st.Page(
                    "pages/scaling.py",
                    title="Compile vs program size",
                    icon=":material/trending_up:",
                ),
                st.Page("pages/shapes.py", title="Shape sweep", icon=":material/straighten:"),
                st.Page("pages/buckets.py", title="Batch buckets", icon=":material/inventory_2:"),
            ],
        }
    )
    ui.page_style()
    ui.safety_notes()
    ui.device_picker()
    ui.restarted_elsewhere()
    navigation.run()
    ui.worker_status()
