"""Retention: the chat-history policy, message ages, a dry run, a confirmed purge and the audit log."""

from __future__ import annotations

import datetime as dt

import plotly.express as px
import streamlit as st

import app_ui as ui

wb = ui.wb()
st.title("Retention")
state = ui.call(ui.retention_status, default=None)
if state is None:
    st.stop()

policy = state["policy"]
cols = st.columns(5)
cols[0].metric("Keep messages for", f"{policy['retention_days']} days")
cols[1].metric("Daily purge at", policy["purge_time"] or "—")
cols[2].metric("Messages", f"{state['messages']:,}")
cols[3].metric("Sessions", f"{state['sessions']:,}")
cols[4].metric("Older than the policy", f"{state['due_for_purge']:,}")
oldest = state["oldest_message"]
st.caption(f"Oldest message: {oldest:%Y-%m-%d %H:%M} UTC. " if oldest else "No chat messages stored. ")
st.caption("The policy comes from `RAG_RETENTION_DAYS` and `RAG_RETENTION_TIME`; `rag retention purge` does the "
           "same from the command line.")

st.subheader("Message ages")
if state["messages"]:
    bars = state["age_histogram"]
    fig = px.bar(x=[b["label"] for b in bars], y=[b["messages"] for b in bars],
                 color=["beyond the policy" if b["beyond_policy"] else "kept" for b in bars],
                 color_discrete_map={"kept": "#4c78a8", "beyond the policy": "#e45756"},
                 labels={"x": "age", "y": "messages", "color": ""}, height=280)
    fig.update_xaxes(type="category")
    ui.count_axis(fig, [b["messages"] for b in bars])
    fig.update_layout(margin=dict(l=10, r=10, t=10, b=10), legend=dict(orientation="h", y=1.1))
    st.plotly_chart(fig, width="stretch")
else:
    st.info("No chat history yet: conversations on the Chat page (and messages stored by workflows) show up here.")

st.subheader("Purge")
days = st.columns([1, 3])[0].number_input("Delete messages older than (days)", min_value=1, max_value=3650,
                       value=int(policy["retention_days"]), step=1, key="purge_days")
older_than = dt.timedelta(days=int(days))
preview = st.session_state.get("purge_preview")
# The preview follows the days input: once asked for, it is counted again whenever the days change.
stale = preview is not None and round(preview["older_than_days"]) != int(days)
if st.button("Dry run: count what would be deleted", key="purge_dry", icon=":material/preview:") or stale:
    result = ui.call(wb.purge_chat_history, older_than, dry_run=True, triggered_by="app")
    if result is not None:
        ui.after_write("purge_preview", result)  # the dry run is audited: the log below shows it at once
if preview:
    st.info(f"A purge of messages older than {ui.plural(round(preview['older_than_days']), 'day')} (before "
            f"{preview['cutoff']:%Y-%m-%d %H:%M} UTC) would delete "
            f"**{ui.plural(preview['messages_deleted'], 'message')}** and "
            f"**{ui.plural(preview['sessions_deleted'], 'session')}**. Nothing was deleted.",
            icon=":material/preview:")
confirm = st.checkbox(f"I understand that messages older than {ui.plural(int(days), 'day')} are deleted for good",
                      key="purge_confirm")
if st.button("Purge now", type="primary", disabled=not confirm, key="purge_go", icon=":material/delete_forever:"):
    result = ui.call(wb.purge_chat_history, older_than, dry_run=False, triggered_by="app")
    if result is not None:
        st.session_state.pop("purge_preview", None)
        ui.flash(f"Deleted {ui.plural(result['messages_deleted'], 'message')} and "
                 f"{ui.plural(result['sessions_deleted'], 'session')} in {result['duration_ms']:.0f} ms.")
        ui.after_write()

st.subheader("Audit log")
audits = state["last_purges"]
if audits:
    st.dataframe([{"ran at": a["ran_at"], "dry run": a["dry_run"], "older than (days)": a["older_than_days"],
                   "messages": a["messages_deleted"], "sessions": a["sessions_deleted"],
                   "oldest remaining": a["oldest_remaining"], "ms": round(a["duration_ms"] or 0, 1),
                   "by": a["triggered_by"]} for a in audits], hide_index=True, width="stretch")
else:
    st.caption("No purge has run yet.")
