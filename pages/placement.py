import streamlit as st

st.title("placement")
st.info("Coming next.")
