# mmevt's stand-in for the drn package mmaction2 1.2.0's release lacks: see drn.py
