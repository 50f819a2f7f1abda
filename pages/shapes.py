import streamlit as st

st.title("shapes")
st.info("Coming next.")
