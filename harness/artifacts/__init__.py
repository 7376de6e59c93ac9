"""What a training leaves on disk and how it is read: the run dir, dump trees and dump.json, metrics, figure
names, and whose code a failed training crashed in."""
