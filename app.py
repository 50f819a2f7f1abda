"""jitscope: see what jax.jit does to your function. `streamlit run app.py`."""

import streamlit as st

import ui

st.set_page_config(page_title="jitscope", page_icon="🔬", layout="wide")

navigation = st.navigation(
    {
        "Compile": [
            st.Page("pages/explore.py", title="Explore", icon="🔬", default=True),
            st.Page("pages/cache.py", title="Cache lab", icon="🗃️"),
        ],
        "Lessons": [
            st.Page("pages/placement.py", title="Where to jit", icon="📍"),
            st.Page("pages/scaling.py", title="Compile vs program size", icon="📈"),
            st.Page("pages/shapes.py", title="Shape sweep", icon="📐"),
            st.Page("pages/buckets.py", title="Batch buckets", icon="🪣"),
        ],
    }
)
ui.sidebar()
navigation.run()
