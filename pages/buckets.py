import streamlit as st

st.title("buckets")
st.info("Coming next.")
