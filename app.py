"""jitscope: see what jax.jit does to your function. `streamlit run app.py`."""

import streamlit as st

import ui

ui.pool()  # starts the worker first: the first Analyze waits for JAX to import in it
ui.leave_legacy_pages(in_app=True)  # Streamlit's pages/ folder mode: see ui.leave_legacy_pages
st.set_page_config(page_title="jitscope", page_icon=":material/biotech:", layout="wide")

navigation = st.navigation(
    {
        "Compile": [
            st.Page("pages/explore.py", title="Explore", icon=":material/biotech:", default=True),
            st.Page("pages/cache.py", title="Cache lab", icon=":material/cached:"),
        ],
        "Runs": [
            st.Page("pages/history.py", title="History", icon=":material/history:"),
            st.Page("pages/diff.py", title="Diff", icon=":material/difference:"),
        ],
        "Lessons": [
            st.Page("pages/placement.py", title="Where to jit", icon=":material/place:"),
            st.Page(
                "pages/scaling.py", title="Compile vs program size", icon=":material/trending_up:"
            ),
            st.Page("pages/shapes.py", title="Shape sweep", icon=":material/straighten:"),
            st.Page("pages/buckets.py", title="Batch buckets", icon=":material/inventory_2:"),
        ],
    }
)
ui.safety_notes()
ui.device_picker()
ui.restarted_elsewhere()
navigation.run()
ui.worker_status()
