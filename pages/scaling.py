import streamlit as st

st.title("scaling")
st.info("Coming next.")
