"""The scripted model (layer 6, pure): policies that answer a request when no real model does, script steps, and
the fault rules a simulated provider injects. The simulator and the scripted provider run them.
"""
