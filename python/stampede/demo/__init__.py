"""The Smart Kiosk color tracker: a Stampede demo application.

``python -m stampede.demo`` runs a real-time, data-parallel color tracker on a synthetic
scene (or a video file) in one process: digitizer, histogram/change detection, a splitter
with K detection workers and a joiner, a low-fidelity tracker that always takes the newest
frame, and a decision stage that correlates the tracks with the frames by timestamp.
``--distributed`` runs the same stages in three address spaces on this host
(:mod:`stampede.demo.distributed`).
:mod:`stampede.demo.bench` measures it against the same work done in a sequential loop.
"""
