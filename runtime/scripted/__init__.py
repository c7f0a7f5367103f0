"""The scripted model (layer 6, pure): policies that answer a request when no real model does, script steps, the
default model (what answers when no script does), and the fault rules a simulated provider injects. The simulator and the scripted provider run them.
"""
