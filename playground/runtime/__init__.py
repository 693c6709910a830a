"""Process-wide facts and resources: devices, the memory budget, measured kernel choices, thread priority."""
