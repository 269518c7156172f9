// A stand-in for the check_layers test: a header of the serve layer.
#pragma once
