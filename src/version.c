/* rps_version: the library's version at run time (include/rdmaps/rdmaps.h). */
#include <rdmaps/rdmaps.h>

#if defined(RPS_PROJECT_MAJOR)
_Static_assert(RPS_VERSION == RPS_VERSION_NUM(RPS_PROJECT_MAJOR, RPS_PROJECT_MINOR,
					      RPS_PROJECT_PATCH),
	       "RPS_VERSION_* in include/rdmaps/rdmaps.h differ from project(VERSION) in CMakeLists.txt");
#endif

const char *rps_version(void)
{
	return RPS_VERSION_STRING;
}
