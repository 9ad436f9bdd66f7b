#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <sys/xattr.h>
#include <sys/stat.h>
static inline double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  const char*path=argv[1]; const char*mode=argv[2]; int n=atoi(argv[3]);
  char buf[64]; struct stat st; double*lat=malloc(n*sizeof(double));
  for(int i=0;i<200;i++){ if(mode[0]=='x') getxattr(path,"user.x",buf,sizeof buf); else stat(path,&st);}
  double t0=now(); int bad=0;
  for(int i=0;i<n;i++){
    double a=now();
    if(mode[0]=='x'){ if(getxattr(path,"user.x",buf,sizeof buf)>=0||errno!=ENODATA) bad++; }
    else { if(stat(path,&st)!=0) bad++; }
    lat[i]=now()-a;
  }
  double dt=now()-t0;
  qsort(lat,n,sizeof(double),cmp);
  printf("%-8s n=%d mean %6.2f us  p10 %6.2f  median %6.2f  p90 %6.2f (bad=%d)\n",mode[0]=='x'?"getxattr":"stat",n,dt/n,lat[n/10],lat[n/2],lat[n*9/10],bad);
  return 0;
}
