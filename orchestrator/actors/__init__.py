"""Actor processes: profiles, instructions, launch, the bubblewrap sandbox and its
confinement record, lifetime.
"""
