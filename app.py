"""jitscope: see what jax.jit does to your function. `streamlit run app.py`."""

import streamlit as st

import ui

st.set_page_config(page_title="jitscope", page_icon=":material/biotech:", layout="wide")
ui.pool()  # starts the worker now, while the page imports its libraries

navigation = st.navigation(
    {
        "Compile": [
            st.Page("views/explore.py", title="Explore", icon=":material/biotech:", default=True),
            st.Page("views/cache.py", title="Cache lab", icon=":material/cached:"),
        ],
        "Lessons": [
            st.Page("views/placement.py", title="Where to jit", icon=":material/place:"),
            st.Page(
                "views/scaling.py", title="Compile vs program size", icon=":material/trending_up:"
            ),
            st.Page("views/shapes.py", title="Shape sweep", icon=":material/straighten:"),
            st.Page("views/buckets.py", title="Batch buckets", icon=":material/inventory_2:"),
        ],
    }
)
ui.safety_notes()
ui.device_picker()
ui.restarted_elsewhere()
navigation.run()
ui.worker_status()
