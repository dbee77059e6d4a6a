"""aorta-proton: the Triton Proton collector for aorta (entry point ``proton``)."""
